/* Citewise widget loader: one tag on any page, no build step.

     <script src="https://CITEWISE/widget.js" data-citewise-key="KEY" data-title="Ask the docs" defer></script>

   A classic script (so the tag needs no type="module"): it puts a launcher button in a Shadow DOM of its own — the
   host page's CSS can't reach inside, and nothing inside leaks out — then imports the chat panel (widget-app.js, an
   ES module that shares api.js and render.js with the chat page) from the same Citewise server. Nothing is added to
   the page's global scope. The server must list this page's origin in server.cors_origins; when it doesn't, the
   module can't load and the launcher says so instead of failing silently. */
(function () {
  "use strict";
  var script =
    document.currentScript || document.querySelector("script[data-citewise-key], script[src*='widget.js']");
  if (!script || document.querySelector("[data-citewise-widget]")) return; // one widget per page

  var base = new URL(".", script.src).href;
  var options = {
    base: base,
    key: script.getAttribute("data-citewise-key") || "",
    title: script.getAttribute("data-title") || "Ask the docs",
    placeholder: script.getAttribute("data-placeholder") || "Ask a question about the docs…",
    mode: script.getAttribute("data-mode") || "",
    position: script.getAttribute("data-position") === "left" ? "left" : "right",
  };

  function start() {
    var host = document.createElement("div");
    host.setAttribute("data-citewise-widget", "");
    var root = host.attachShadow({ mode: "open" });
    var style = document.createElement("link");
    style.rel = "stylesheet";
    style.href = base + "widget.css";
    var shell = document.createElement("div");
    shell.className = "cw cw-" + options.position;
    shell.hidden = true; // until the stylesheet is in: no flash of an unstyled button
    var launcher = document.createElement("button");
    launcher.type = "button";
    launcher.className = "cw-launcher";
    launcher.setAttribute("aria-label", options.title);
    launcher.setAttribute("aria-expanded", "false");
    launcher.innerHTML =
      '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M4 5h16v11H9l-5 4z" fill="none" stroke="currentColor" ' +
      'stroke-width="1.8" stroke-linejoin="round"/><path d="M8.5 9.5h7M8.5 12.5h4.5" stroke="currentColor" ' +
      'stroke-width="1.8" stroke-linecap="round"/></svg><span class="cw-launcher-label"></span>';
    launcher.querySelector(".cw-launcher-label").textContent = "Ask";
    shell.appendChild(launcher);
    root.appendChild(style);
    root.appendChild(shell);
    style.addEventListener("load", function () { shell.hidden = false; });
    style.addEventListener("error", function () { shell.hidden = false; });
    (document.body || document.documentElement).appendChild(host);

    import(base + "widget-app.js").then(
      function (app) { app.mount({ host: host, root: root, shell: shell, launcher: launcher, options: options }); },
      function (error) {
        // Almost always CORS: this origin is not in the server's allow-list (or the server is down).
        var why =
          "This page's address (" + location.origin + ") is not allowed to use the Citewise server at " + base +
          ", or the server can't be reached. Its operator can allow it with server.cors_origins.";
        console.error("Citewise widget:", why, error);
        launcher.setAttribute("data-unavailable", "");
        launcher.title = why;
        launcher.addEventListener("click", function () {
          var note = root.querySelector(".cw-unavailable");
          if (!note) {
            note = document.createElement("p");
            note.className = "cw-unavailable";
            note.setAttribute("role", "alert");
            note.textContent = "The assistant is not available on this page. " + why;
            shell.appendChild(note);
          } else {
            note.hidden = !note.hidden;
          }
        });
      }
    );
  }

  if (document.body) start();
  else document.addEventListener("DOMContentLoaded", start);
})();
