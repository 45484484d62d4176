"""Run page: one chart per signal family, updating live, with events and notes drawn on them;
a distributed job's ranks side by side in a closed Ranks section; system vitals as small
multiples in a closed System section.

Data flow (all state in the browser's stores, all data through the API):
* the page's layout (`layout.page_layout`) reads the run and draws its main charts, events and
  notes before it answers, so opening a run costs one round trip, not a chain of callbacks;
* `refresh` (callbacks.py) is the one writer of the charts and of what they were drawn from
  (`run-drawn`): every second (a tick the browser skips while a refresh is on its way), it
  appends each chart's new points with `dash.Patch()` from each metric's cursor (the user's
  zoom stays: the figures' `uirevision` does not change), draws a chart again when its events
  changed or it grew too long, and draws every chart again when the view (range, smoothing, log,
  x axis, metrics) or the set of charts changes; a zoom changes the view's range in the browser.

The Ranks section (`ranks`) has its own refresh (callbacks.py `refresh_ranks`): read only while
it is open, every few seconds while the job may still move, and when the run's events about its
ranks change.

The page in its modules: `layout` (the URL's view and the page as it opens), `data` (reading
the run, drawing and updating its charts), `views` (header, side lists), `events` (the events
panel), `details` (Run details), `ranks` (the Ranks section) and `callbacks`.
"""

from holter_dashboard.pages.run.callbacks import register
from holter_dashboard.pages.run.layout import page_layout, title

__all__ = ["page_layout", "register", "title"]
