"""Checks run in a page by the browser tests (issue 31): a "—" needs its reason beside it, a
value's text fits its box, and figures are read back from the page's own text.

How the app gives a "—" its reason (frontend/templates): words in the same cell, definition
or money line (`— <span class="hint">why</span>`, `— (the catalog default applies)`,
`— <span class="unit">EUR, no prices</span>`), a `title` on it, or a table whose caption or
column header says what “—” means there. A currency code alone is no reason.
"""

from __future__ import annotations

import re

# Each "—" standing as a value (its cell's text starts with it; a dash inside a sentence is
# punctuation) without a reason beside it, as "row or term: cell text".
REASONLESS_DASHES_JS = r"""() => {
  const found = [];
  const root = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const words = s => (s.replace(/\b[A-Z]{3}\b/g, '').match(/\p{L}/gu) || []).length;
  const header = cell => {
    const table = cell.closest('table');
    const head = table && table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    return head ? head.cells[cell.cellIndex] : null;
  };
  while (walker.nextNode()) {
    const node = walker.currentNode, parent = node.parentElement;
    if (!node.textContent.includes('—')) continue;
    if (parent.closest('option, select, script, style, textarea, .visually-hidden')) continue;
    if (!parent.checkVisibility()) continue;
    const cell = parent.closest('.money-line, td, th, dd, li') || parent;
    const text = cell.innerText.trim();
    if (!text.startsWith('—')) continue;
    let reason = words(text.slice(1)) >= 4 || !!cell.querySelector('[title]');
    for (let el = parent; !reason && el && el !== cell.parentElement; el = el.parentElement) {
      reason = !!(el.getAttribute('title') || '').trim();
    }
    const box = cell.closest('td, th');
    if (!reason && box) {
      const caption = box.closest('table').caption;
      const column = header(box);
      reason = !!(caption && caption.innerText.includes('—'))
        || !!(column && (column.getAttribute('title') || column.innerText.includes('—')));
    }
    if (reason) continue;
    const row = cell.closest('tr');
    const term = cell.closest('dd') && cell.closest('dd').previousElementSibling;
    const label = row ? (row.querySelector('th') || row.cells[0]).innerText
      : term ? term.innerText : '';
    found.push(`${label.trim().slice(0, 60)}: “${text.slice(0, 80)}”`);
  }
  return found;
}"""

# Each visible figure (text with a digit) whose box reaches past its container: the tile, cell
# or definition it sits in, any ancestor that hides overflow, and for chart text the chart's
# SVG and the clip path Plotly draws it under. A scrolling box (a wide table, a legend with
# a scroll bar) is no clipping.
CLIPPED_VALUES_JS = r"""() => {
  const found = [];
  const SLACK_PX = 1;
  const inside = (a, b) => a.left >= b.left - SLACK_PX && a.right <= b.right + SLACK_PX
    && a.top >= b.top - SLACK_PX && a.bottom <= b.bottom + SLACK_PX;
  const name = el => el.tagName.toLowerCase()
    + [...el.classList].slice(0, 2).map(c => '.' + c).join('');
  const px = r => [r.left, r.right, r.top, r.bottom].map(Math.round).join(',');
  const report = (el, text, box, container, bounds) => found.push(
    `${name(el)} “${text.trim().slice(0, 40)}” (${px(box)}) outside ${container} (${px(bounds)})`);
  const shown = el => el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  // The box a clip-path="url(#id)" cuts to, in the page's coordinates.
  const clipBox = el => {
    const id = (el.getAttribute('clip-path').match(/#([^'")]+)/) || [])[1];
    const path = id && document.getElementById(id);
    const rect = path && path.querySelector('rect');
    if (!rect) return null;
    const m = el.getScreenCTM(), at = a => parseFloat(rect.getAttribute(a) || '0');
    const p = new DOMPoint(at('x'), at('y')).matrixTransform(m);
    const q = new DOMPoint(at('x') + at('width'), at('y') + at('height')).matrixTransform(m);
    return {left: Math.min(p.x, q.x), right: Math.max(p.x, q.x),
      top: Math.min(p.y, q.y), bottom: Math.max(p.y, q.y)};
  };
  const root = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, parent = node.parentElement;
    if (!/\d/.test(node.textContent)) continue;
    if (parent.closest('svg, option, select, script, style, textarea, .visually-hidden')) continue;
    if (!shown(parent)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    const boxes = [parent.closest('td, th, dd, .stats > div, .scope-tile')].filter(Boolean);
    for (let el = parent; el && el !== document.body; el = el.parentElement) {
      const style = getComputedStyle(el);
      if (/auto|scroll/.test(style.overflowX)) break;
      if (/hidden|clip/.test(style.overflowX + ' ' + style.overflowY)) boxes.push(el);
    }
    const cut = boxes.find(el => !inside(box, el.getBoundingClientRect()));
    if (cut) report(parent, node.textContent, box, name(cut), cut.getBoundingClientRect());
  }
  for (const text of document.querySelectorAll('.js-plotly-plot svg text')) {
    if (!/\d/.test(text.textContent) || !shown(text)) continue;
    const box = text.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    const legend = text.closest('.legend'), bar = legend && legend.querySelector('.scrollbar');
    if (bar && bar.getBoundingClientRect().height > 0) continue;  // a legend that scrolls
    const chart = text.closest('.js-plotly-plot');
    const svg = chart.querySelector('svg.main-svg').getBoundingClientRect();
    const clipped = text.closest('[clip-path]');
    const area = clipped && clipBox(clipped);
    if (!inside(box, svg)) report(text, text.textContent, box, `#${chart.id} svg`, svg);
    else if (area && !inside(box, area)) {
      report(text, text.textContent, box, `#${chart.id} plot area`, area);
    }
  }
  return found;
}"""

NUMBER = re.compile(r"-?[\d,]+(?:\.\d+)?")


def number(text: str) -> float:
    """A figure as the page prints it ("1,241,317", "94.5", "-2,541.1")."""
    found = NUMBER.search(text.replace("−", "-"))
    assert found is not None, f"no figure in {text!r}"
    return float(found[0].replace(",", ""))
