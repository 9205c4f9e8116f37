/*
 * Runs on the OAuth callback page of an authorization the inspector started: tells the
 * inspector how it ended (./report.ts), and closes the window.
 */
import { reportOverChannel } from './report.js';

const outcome = document.getElementById('outcome');
if (outcome !== null) reportOverChannel(outcome);
