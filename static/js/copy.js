// Copy buttons beside values (views.Outputs). The buttons are hidden until this file
// shows them: without it they could do nothing, and the value can still be selected.
// A click copies the text of the element the button's data-copy names and says
// "Copied" beside that button (a status, read out by screen readers), until another
// value is copied.
"use strict";

(() => {
  document.documentElement.classList.add("can-copy");

  const say = (button, words) => {
    for (const other of document.querySelectorAll(".copy-status")) other.textContent = "";
    const status = button.parentElement.querySelector(".copy-status");
    if (status) status.textContent = words;
  };

  // Without the asynchronous clipboard (an insecure origin, a refused permission), the
  // value is selected and copied the older way.
  const copySelected = (source) => {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      return document.execCommand("copy");
    } catch {
      return false;
    }
  };

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-copy]");
    if (!button) return;
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent);
      say(button, "Copied");
    } catch {
      say(button, copySelected(source) ? "Copied" : "Not copied: select the value and copy it");
    }
  });
})();
