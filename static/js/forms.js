// Gantry's forms, a little friendlier where a browser alone falls short. The forms work
// without this file; it only adds:
// - a link of an error summary focuses its field with its label and hint in view (a
//   plain "#field" jump puts the field at the window's top edge, its label above it);
// - inline validation keeps a field's aria-invalid in step with its message;
// - a confirmation armed from its trigger takes the focus (DESIGN §10: confirmations
//   move focus), so what it restates is read first.
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

// A confirmation is a <details class="confirmation"> whose <summary> arms it. Only an
// arming the person made (a click, or Enter or Space on the summary, which click too)
// moves the focus: one drawn open with field errors keeps it on the first error.
// Closing it from the summary leaves the focus on the summary, the trigger.
document.addEventListener("click", (event) => {
  const trigger = event.target.closest("details.confirmation > summary");
  if (!trigger) return;
  const box = trigger.parentElement;
  box.addEventListener("toggle", () => {
    if (!box.open) return;
    const body = box.querySelector(".confirmation-body");
    if (body) body.focus();
  }, { once: true });
});
