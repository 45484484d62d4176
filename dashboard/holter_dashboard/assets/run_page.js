// The run page in the browser: the gate in front of its refresh, the zoom, the URL and the delete dialog.
window.dash_clientside = Object.assign({}, window.dash_clientside, {
    holter: {
        // The tick asks for a refresh only when none is on its way: a refresh slower than the
        // tick (a busy machine, a big run) is skipped, never raced. A refresh that never
        // answered (the service restarted) stops holding the gate after a while.
        tick_gate: function (n) {
            const noUpdate = window.dash_clientside.no_update;
            const since = window._holterRefreshSince || 0;
            if (since && Date.now() - since < 20000) return noUpdate;
            window._holterRefreshSince = Date.now();
            return n;
        },
        // The delete button opens its dialog and the dialog's cancel closes it. A button
        // reports its first n_clicks as it mounts: only a click opens the dialog.
        ask_before_deleting: function (opened, _cancel) {
            const triggered = window.dash_clientside.callback_context.triggered_id;
            if (triggered === "run-delete") return opened ? true : window.dash_clientside.no_update;
            return false;
        },
        refreshed: function (_done) {
            window._holterRefreshSince = 0;
            return window.dash_clientside.no_update;
        },

        // A drag-zoom (or a double-click back out) on a chart becomes the view's step range, which
        // the service then reads at full resolution. It runs here rather than as a server callback
        // because Dash drops the answer of a server callback that is triggered again before it
        // returns, and every chart reports a relayout (its autosize) as it is first drawn: a zoom
        // made meanwhile would be lost.
        follow_zoom: function (_relayouts, view, drawn) {
            const noUpdate = window.dash_clientside.no_update;
            // Charts that report relayouts together (their autosize as they are drawn, beside a
            // zoom) come in one call: the zoom is whichever of them carries a range, not the first.
            const trigger = (window.dash_clientside.callback_context.triggered || []).find(t => t && t.value && (
                t.value['xaxis.range'] || t.value['xaxis.range[0]'] !== undefined || t.value['xaxis.autorange']));
            if (!trigger || !view) return noUpdate;
            const payload = trigger.value;
            const key = JSON.parse(trigger.prop_id.slice(0, trigger.prop_id.lastIndexOf('.'))).key;
            const panels = ((drawn && drawn.main) || []).concat((drawn && drawn.system) || []);
            const heatmap = panels.some(p => p.key === key && p.kind === 'heatmap');  // always by step
            const next = Object.assign({}, view);
            let range = payload['xaxis.range'] || [payload['xaxis.range[0]'], payload['xaxis.range[1]']];
            if (range[0] !== undefined && range[1] !== undefined) {
                if (view.x_axis === 'time' && !heatmap) {
                    const clock = (drawn && drawn.clock) || [];
                    if (clock.length < 2) return noUpdate;
                    range = range.map(x => stepAt(clock, epochMs(x)));
                }
                next.start = Math.max(0, Math.floor(range[0]));
                next.end = Math.ceil(range[1]);
            } else if (payload['xaxis.autorange']) {
                next.start = null;
                next.end = null;
            } else {
                return noUpdate;
            }
            return next.start === view.start && next.end === view.end ? noUpdate : next;
        },

        // The URL follows the view (history.replaceState: no reload), so it can be shared or bookmarked.
        view_to_url: function (view) {
            if (!view || !window.location.pathname.startsWith('/runs/')) return window.dash_clientside.no_update;
            const q = new URLSearchParams();
            if (view.metrics && view.metrics.length) q.set('metrics', view.metrics.join(','));
            if (view.start !== null && view.start !== undefined) { q.set('start', view.start); q.set('end', view.end); }
            if (view.smoothing !== 0.6) q.set('smooth', view.smoothing);
            if (view.log_y) q.set('log', '1');
            if (view.x_axis === 'time') q.set('x', 'time');
            setTimeout(() => {
                // the rank picked in the Ranks section is no part of the view: kept as the URL has it then
                const rank = new URLSearchParams(window.location.search).get('rank');
                if (rank !== null) q.set('rank', rank);
                const s = q.toString();
                window.history.replaceState(null, '', window.location.pathname + (s ? '?' + s : ''));
            }, 0);
            return window.dash_clientside.no_update;
        },

        // A click on the ranks' heatmap picks the rank of its row (each row sits at its rank on the y axis).
        pick_rank_on_heatmap: function (click, picked) {
            const point = ((click && click.points) || [])[0];
            const rank = point && point.y;
            if (typeof rank !== 'number' || rank === picked) return window.dash_clientside.no_update;
            return Math.round(rank);
        },

        // The URL names the rank picked in the Ranks section (`?rank=N`: the page opens on it), and
        // the section scrolls into view when a rank is picked (a link on an event far below it).
        rank_to_url: function (rank) {
            window._holterPickedRank = rank;  // what a click on the picked rank's row takes back (pickRank)
            if (!window.location.pathname.startsWith('/runs/')) return window.dash_clientside.no_update;
            setTimeout(() => {
                const q = new URLSearchParams(window.location.search);
                if (rank === null || rank === undefined) q.delete('rank'); else q.set('rank', rank);
                const s = q.toString();
                window.history.replaceState(null, '', window.location.pathname + (s ? '?' + s : ''));
                const section = document.getElementById('run-ranks-section');
                if (rank !== null && rank !== undefined && section) section.scrollIntoView({block: 'start'});
            }, 0);
            return window.dash_clientside.no_update;
        },
    },
});

// A rank picked on an event's link (`data-pick-open`: the Ranks section opens on it, on the
// event's metric when it has one, `data-pick-metric`: the loss a rank left its peers' band on) or
// on its row in the section (the picked rank again: picked no more). A click listener rather
// than a callback on the buttons' clicks: the events panel and the ranks' table are drawn again
// every few seconds while a job runs, and a click that lands as they are replaced would reach a
// callback with the new buttons' clicks (none) and be lost.
function pickRank(event) {
    const target = event.target.closest ? event.target.closest('[data-pick-rank]') : null;
    const set = window.dash_clientside && window.dash_clientside.set_props;
    if (!target || !set) return;
    const rank = Number(target.getAttribute('data-pick-rank'));
    if (target.hasAttribute('data-pick-open')) {
        const metric = target.getAttribute('data-pick-metric');
        if (metric) set('run-ranks-metric', {value: metric});
        set('run-ranks-open', {value: 'ranks'});  // the section's value when open (pages/run/ranks.py SECTION)
        set('run-rank', {data: rank});
    } else {
        set('run-rank', {data: window._holterPickedRank === rank ? null : rank});
    }
}
document.addEventListener('click', pickRank);

// A point on a date axis as Plotly reports it ("2026-11-22 02:33:12.5", in UTC, or ms) in ms since the epoch.
function epochMs(value) {
    if (typeof value === 'number') return value;
    const [date, time = '00:00:00'] = String(value).trim().split(/[ T]/);
    const [year, month, day] = date.split('-').map(Number);
    const [hours, minutes = 0, seconds = 0] = time.split(':').map(Number);
    return Date.UTC(year, month - 1, day, hours, minutes, 0) + seconds * 1000;
}

// The step at a wall time (ms), interpolated on the [step, ms] pairs of the chart's clock.
function stepAt(clock, ms) {
    if (ms <= clock[0][1]) return clock[0][0];
    const last = clock[clock.length - 1];
    if (ms >= last[1]) return last[0];
    let lo = 0, hi = clock.length - 1;
    while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (clock[mid][1] <= ms) lo = mid; else hi = mid;
    }
    const [s0, t0] = clock[lo], [s1, t1] = clock[hi];
    return t1 === t0 ? s0 : s0 + (s1 - s0) * (ms - t0) / (t1 - t0);
}
