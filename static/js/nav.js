// Gantry's navigation menus are native <details> disclosures: they open and close with
// the mouse, Enter and Space without this file. It only adds what a menu is expected to
// do besides:
// - Escape closes the innermost open menu and puts the focus back on its summary;
// - a click elsewhere, or the focus moving out, closes an open menu; opening one
//   closes the others beside it;
// - a browser that cannot show a closed disclosure's content (no ::details-content)
//   keeps the phone's "Menu" open on a wide screen, where the bar shows it whole.
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

  // The fallback: the wide bar is the "Menu" disclosure kept open, its summary hidden.
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
  if (!CSS.supports("selector(::details-content)")) {
    document.addEventListener("DOMContentLoaded", fit);
    wide.addEventListener("change", fit);
  }
})();
