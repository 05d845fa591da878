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
