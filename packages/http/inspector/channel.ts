/** The BroadcastChannel on which the callback page tells the inspector how a consent ended. */
export const CALLBACK_CHANNEL = 'keyway-callback';
