// Gantry's navigation menus are native <details> disclosures: they open and close with
// the mouse, Enter and Space without this file. It only adds what a menu is expected to
// do besides:
// - Escape closes the innermost open menu and puts the focus back on its summary;
// - a click elsewhere, or the focus moving out, closes an open menu; opening one
//   closes the others beside it;
// - on a screen 600 px wide or more, the phone's "Menu" is kept open: the bar shows it
//   whole, its summary hidden.
"use strict";

(() => {
  const openMenus = "details.navmenu[open], details.menu[open]";

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const open = event.target.closest && event.target.closest(openMenus);
    if (!open || wideMenu(open)) return;
    open.open = false;
    open.querySelector("summary").focus();
  });

  document.addEventListener("click", (event) => {
    for (const open of document.querySelectorAll(openMenus)) {
      if (!open.contains(event.target) && !wideMenu(open)) open.open = false;
    }
  });

  document.addEventListener("focusout", (event) => {
    const open = event.target.closest && event.target.closest("details.navmenu[open]");
    if (open && event.relatedTarget && !open.contains(event.relatedTarget)) open.open = false;
  });

  document.addEventListener("toggle", (event) => {
    const opened = event.target;
    if (!opened.matches || !opened.matches("details.navmenu") || !opened.open) return;
    for (const other of document.querySelectorAll("details.navmenu[open]")) {
      if (other !== opened && !other.contains(opened)) other.open = false;
    }
  }, true);

  // On a wide screen the "Menu" disclosure is the bar: the stylesheet shows its content
  // while it is closed (::details-content), and here it is opened for real, so what
  // assistive technology is told matches what is shown (and a browser without
  // ::details-content shows the bar too). Under 600 px it starts closed.
  const wide = window.matchMedia("(min-width: 600px)");
  function wideMenu(el) {
    return el.classList.contains("menu-wide");
  }
  function fit() {
    const menu = document.getElementById("menu");
    if (!menu) return;
    menu.classList.toggle("menu-wide", wide.matches);
    menu.open = wide.matches;
  }
  fit();
  wide.addEventListener("change", fit);
})();
