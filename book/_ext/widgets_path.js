// Tell RequireJS where the vendored widget manager lives, so that its fonts and chunks load from this site
// (relative to this script, whatever the page's folder) and not from a path beside the page.
(function () {
  var src = document.currentScript && document.currentScript.src;
  if (!src || typeof require === "undefined") return;
  var base = src.substring(0, src.lastIndexOf("/")) + "/html-manager";
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": base } });
})();
