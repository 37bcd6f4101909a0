"""The read-only web view at /ui: the quota tree, a ClusterQueue, a pod and the decisions journal as HTML.

Each page is drawn from the same view as its JSON twin under /debug (app/observe/views.py,
podview.py), so the numbers a person reads in a browser are the numbers curl shows. The
pages are rendered on the server (Jinja2, autoescaped); the only script, static/ui.js,
refreshes the journal. Nothing is loaded from outside Quotient and nothing changes state.
"""
