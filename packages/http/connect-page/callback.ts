/*
 * Runs on the OAuth callback page of an authorization the connect page started. In a popup:
 * tells the connect page over the channel and closes (../inspector/report.ts). In the
 * connect page's own tab (a narrow screen, a blocked popup): leaves the outcome in this
 * tab's sessionStorage and goes back to the page, which tells it.
 */
import { outcomeOf, reportOverChannel } from '../inspector/report.js';
import { OUTCOME_KEY, RETURN_KEY } from './return.js';

const outcome = document.getElementById('outcome');
const returnTo = sessionStorage.getItem(RETURN_KEY);
if (outcome !== null && returnTo?.startsWith('/')) {
  sessionStorage.setItem(OUTCOME_KEY, JSON.stringify(outcomeOf(outcome)));
  location.replace(returnTo);
} else if (outcome !== null) {
  reportOverChannel(outcome);
}
