/*
 * A consent the connect page (docs/api.md §19) took in its own tab: where the tab goes back
 * to, and how the consent ended, kept in that tab's sessionStorage by the callback page.
 */

/** The connect page's path, set before the tab leaves for the consent. */
export const RETURN_KEY = 'keyway-connect-return';

/** How the consent ended (`{ connection_id, status, error }`), for the page to tell. */
export const OUTCOME_KEY = 'keyway-connect-outcome';
