"""Run page: one chart per signal family, updating live, with events and notes drawn on them.

Data flow (all state in the browser's stores, all data through the API):
* the page's layout (`page_layout`) reads the run and draws every chart before it answers, so
  opening a run costs one round trip, not a chain of callbacks;
* `tick` (every second) reads the run, its events and notes; plans the panels again when the
  set of metrics changes; otherwise appends new points to the charts with `dash.Patch()` (the
  user's zoom stays, since the figures' `uirevision` does not change);
* `draw` renders every chart again when the view (range, smoothing, log, x axis), the panels
  or the events change; a zoom changes the view's range, and `draw` reads that range again at
  full resolution.

The page in four modules: `layout` (the URL's view and the page as it opens), `data` (reading
the run and drawing its charts, live appends), `views` (header, side lists) and `callbacks`.
"""

from holter_dashboard.pages.run.callbacks import register
from holter_dashboard.pages.run.layout import page_layout, title

__all__ = ["page_layout", "register", "title"]
