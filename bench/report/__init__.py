"""HTML reports: per-run pages with inline SVG plots, latest.html and an index of runs."""
