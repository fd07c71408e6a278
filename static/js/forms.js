// Gantry's forms, a little friendlier where a browser alone falls short. The forms work
// without this file; it only adds:
// - a link of an error summary focuses its field with its label and hint in view (a
//   plain "#field" jump puts the field at the window's top edge, its label above it);
// - inline validation keeps a field's aria-invalid in step with its message.
"use strict";

document.addEventListener("click", (event) => {
  const link = event.target.closest(".error-summary a[href^='#']");
  if (!link) return;
  const field = document.getElementById(decodeURIComponent(link.hash.slice(1)));
  if (!field) return;
  event.preventDefault();
  (field.closest(".field") || field).scrollIntoView({ block: "center" });
  field.focus({ preventScroll: true });
});

// A message slot is "<id>-error" beside the field "<id>"; after htmx swaps one in, the
// field says whether it is invalid now.
document.addEventListener("htmx:afterSettle", () => {
  for (const slot of document.querySelectorAll(".field-error[id$='-error']")) {
    const field = document.getElementById(slot.id.slice(0, -"-error".length));
    if (!field) continue;
    const invalid = slot.textContent.trim() !== "";
    field.setAttribute("aria-invalid", invalid ? "true" : "false");
  }
});
