// actgate approval service: on the landing page of a browser that is not signed in, goes on to
// sign in and hands the link's #moment-NAMESPACE/NAME (or #moment-NAME) to the service, which keeps it through
// the sign-in and sends the browser back to that moment (a fragment never reaches a server by
// itself). Loaded from the service itself (CSP script-src 'self'); without it, the page's link
// signs in and shows every moment.
"use strict";
(function () {
  var m = /^#moment-((?:[a-z0-9][a-z0-9-]*\/)?[a-z0-9][a-z0-9.-]*)$/.exec(location.hash);
  location.replace("/login" + (m ? "?moment=" + encodeURIComponent(m[1]) : ""));
})();
