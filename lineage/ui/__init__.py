"""The explorer's static page (index.html, style.css, app.js), served at /ui by the API."""
