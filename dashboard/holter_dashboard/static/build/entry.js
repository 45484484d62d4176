// The plotly.js the dashboard ships: its core (the scatter trace, axes, legends, shapes,
// annotations) with the two traces it draws besides, heatmap (per-layer families) and scattergl
// (WebGL lines for long series). See ../README.md for how to build it.
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/heatmap'), require('plotly.js/lib/scattergl')]);
module.exports = Plotly;
