/* The sidebar buttons of the article header (added by qkv_course.sphinx.listing).

   pydata-sphinx-theme 0.17 puts a second button with the class primary-toggle (and
   secondary-toggle) in its hidden navbar, ahead of sphinx-book-theme's buttons, and both themes
   wire only the first one they find (document.querySelector). The buttons a reader sees then do
   nothing: on a phone the chapter list and the page's contents cannot be opened
   (pydata/pydata-sphinx-theme#2451). A click on a button that is not the wired one is handed to
   the wired one; once the themes wire the visible button themselves, nothing is forwarded twice. */
(() => {
  const forward = () => {
    for (const kind of ["primary", "secondary"]) {
      const [wired, ...others] = document.querySelectorAll(`.${kind}-toggle`);
      for (const button of others) {
        button.addEventListener("click", (event) => {
          if (event.defaultPrevented) return; // a theme handled this button itself
          event.preventDefault();
          wired.click();
        });
      }
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", forward);
  else forward();
})();

/* A figure's image opens whole when tapped. On a phone a wide figure (a grid of heads) is drawn
   at under half its size, its labels too small to read; the image file itself can be zoomed.
   Only figures of the article: the theme's own images (logos, buttons) stay as they are. */
(() => {
  const link = () => {
    for (const img of document.querySelectorAll(".bd-article figure img")) {
      if (img.closest("a")) continue;
      const a = document.createElement("a");
      a.href = img.currentSrc || img.src;
      a.className = "qkv-figure-link";
      a.title = "Open the figure at full size";
      img.replaceWith(a);
      a.appendChild(img);
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", link);
  else link();
})();
