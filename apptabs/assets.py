"""The page's own script and style, given to `launch` (they hold nothing from the workspace)."""

# Keyboard steps through the listed probes on the Probe detail tab (j / → next, k / ← previous), as inspect's log
# viewer and promptfoo's result view do; keys typed into a field are left alone.
KEYS_JS = """() => { document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (t && t.closest && (t.closest('input, textarea, select') || t.isContentEditable)) return;
  if (!document.querySelector('#probe-detail')?.offsetParent) return;
  const id = {j: 'probe-next', ArrowRight: 'probe-next', k: 'probe-prev', ArrowLeft: 'probe-prev'}[e.key];
  if (id) { document.getElementById(id)?.click(); e.preventDefault(); }
}); }"""
# Run pickers end their text with an ellipsis before the dropdown's arrow instead of running under it; a
# table's cells wrap (long answers stay readable without horizontal scrolling at 1400x1000).
CSS = """
.wb-run-pick input { text-overflow: ellipsis; padding-right: 2.2em !important; }
.wb-run-pick .wrap-inner { overflow: hidden; }
#runs-table td, #probes-table td, #review-log td, #gate-history td, #job-events td {
  white-space: normal; overflow-wrap: anywhere; }
"""
