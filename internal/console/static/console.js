// actgate console: the page works without this script; it only prevents a resolution from
// being sent twice by a double click. Loaded from the console itself (CSP script-src 'self').
"use strict";
document.addEventListener("submit", function (ev) {
  var form = ev.target;
  if (form.dataset.sent === "1") {
    ev.preventDefault();
    return;
  }
  form.dataset.sent = "1";
  // Buttons are disabled after the submission has taken the clicked button's value.
  setTimeout(function () {
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
  }, 0);
});

// actgate console: keeps this console's key in localStorage (isolated by origin, port
// included) when the keyed page is open, and on the keyless landing page goes on to the page
// with the key kept, preserving the #moment-ID of an announcement's link. Without it (scripts
// off, or a console restarted with a new key) the landing page says to open the printed URL.
(function () {
  var slot = "actgate-console-key";
  var parts = location.pathname.split("/");
  try {
    if (parts.length >= 3 && parts[1] !== "" && parts[1] !== "static") {
      localStorage.setItem(slot, parts[1]);
      return;
    }
    var key = localStorage.getItem(slot);
    if (location.pathname === "/" && key && /^[0-9A-Za-z_-]+$/.test(key)) {
      location.replace("/" + key + "/" + location.hash);
    }
  } catch (e) {
    // Storage refused (private mode, disabled): the landing page says what to do.
  }
})();
