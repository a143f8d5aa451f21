// Glue between the vendored widget manager and this site, loaded right before it (see _config.yml).
(function () {
  // 1. Tell RequireJS where the widget manager lives, so that its fonts and chunks load from this site
  //    (relative to this script, whatever the page's folder) and not from a path beside the page.
  //    embed-amd.js defines its bundles as named AMD modules ("@jupyter-widgets/base", ".../controls",
  //    ".../html-manager", ".../html-manager/dist/libembed-amd", ...); each bundle's webpack public path
  //    is the folder of its module URL, so every one of them must resolve into html-manager/, where the
  //    icon fonts (*.woff2, *.woff, ...) are vendored. Without this, "@jupyter-widgets/base" resolves
  //    beside the page (notebooks/@jupyter-widgets/base.js) and its fonts fail to load.
  var src = document.currentScript && document.currentScript.src;
  if (src && typeof require !== "undefined") {
    var base = src.substring(0, src.lastIndexOf("/")) + "/html-manager";
    require.config({
      paths: { "@jupyter-widgets/html-manager/dist": base, "@jupyter-widgets": base },
    });
  }
  // 2. The widget manager typesets with MathJax 2's `MathJax.Hub.Queue`; the site serves MathJax 3, which has no
  //    Hub. Give it a small one that forwards to MathJax 3's typesetPromise.
  function addHub() {
    var M = window.MathJax;
    if (!M || M.Hub) return;
    M.Hub = {
      Queue: function () {
        for (var i = 0; i < arguments.length; i++) {
          var job = arguments[i];
          if (Array.isArray(job) && job[0] === "Typeset" && window.MathJax.typesetPromise) {
            window.MathJax.typesetPromise(job[2] ? [job[2]] : undefined).catch(function () {});
          } else if (typeof job === "function") {
            job();
          }
        }
      },
    };
  }
  addHub();
  document.addEventListener("DOMContentLoaded", addHub);
  window.addEventListener("load", addHub);
})();
