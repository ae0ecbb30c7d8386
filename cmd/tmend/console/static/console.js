// The tmend console's script: live progress of running runs, and expanding or folding
// all of a diff's content. The pages work without it. It writes text only (textContent),
// never HTML.
(function () {
  'use strict';

  function set(row, field, value) {
    var cell = row.querySelector('[data-field="' + field + '"]');
    if (cell) cell.textContent = String(value);
  }

  function show(row, p) {
    var c = p.counts;
    var rollback = row.getAttribute('data-mode') === 'rollback';
    var status = row.querySelector('[data-field="status"]');
    if (status) {
      status.textContent = p.status;
      status.className = 'badge rs-' + p.status;
    }
    set(row, 'scanned', (p.live && !rollback ? '≥ ' : '') + (c.scanned || 0));
    set(row, 'repaired', (rollback ? c.restored : c.repaired) || 0);
    set(row, 'conflict', (rollback ? c.refused : c.conflict) || 0);
    set(row, 'failed', c.failed || 0);
    set(row, 'duration', p.duration);
    showPartitions(p);
  }

  // showPartitions brings a running scan's partition table up to date.
  function showPartitions(p) {
    var table = document.querySelector('[data-parts-of="' + p.id + '"]');
    if (!table || !p.partitions) return;
    p.partitions.forEach(function (pt) {
      var tr = table.querySelector('[data-part="' + pt.partition + '"]');
      if (!tr) return;
      set(tr, 'part-status', pt.status + (pt.attempt > 1 ? ' (attempt ' + pt.attempt + ')' : ''));
      set(tr, 'scanned', pt.scanned);
      set(tr, 'worker', pt.worker || '—');
      set(tr, 'ago', pt.ago + ' ago' + (pt.quiet ? ' (no progress: stuck?)' : ''));
      tr.classList.toggle('quiet', pt.quiet);
    });
  }

  // poll follows a running run until it ends; the run page then reloads for its totals.
  function poll(row, started) {
    var id = row.getAttribute('data-live-run');
    fetch('/console/api/runs/' + encodeURIComponent(id), {
      credentials: 'same-origin',
      headers: { Accept: 'application/json' }
    }).then(function (r) {
      if (!r.ok) throw new Error('status ' + r.status);
      return r.json();
    }).then(function (p) {
      show(row, p);
      if (p.status === 'running') {
        setTimeout(function () { poll(row, started); }, 1000);
        return;
      }
      row.removeAttribute('data-live-run');
      if (row.closest('[data-reload-when-done]')) window.location.reload();
    }).catch(function () {
      // The daemon may be restarting: try again, less often, for an hour.
      if (Date.now() - started < 3600 * 1000) setTimeout(function () { poll(row, started); }, 5000);
    });
  }

  function all(selector, fn) {
    Array.prototype.forEach.call(document.querySelectorAll(selector), fn);
  }

  document.addEventListener('DOMContentLoaded', function () {
    all('[data-live-run]', function (row) { setTimeout(function () { poll(row, Date.now()); }, 1000); });
    all('[data-expand]', function (b) {
      b.addEventListener('click', function () {
        all('#' + b.getAttribute('data-expand') + ' details', function (d) { d.open = true; });
      });
    });
    all('[data-collapse]', function (b) {
      b.addEventListener('click', function () {
        all('#' + b.getAttribute('data-collapse') + ' details', function (d) { d.open = false; });
      });
    });
  });
})();
