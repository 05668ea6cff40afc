"""NeMo Gym resource servers, served in process (session.py; the app: app.py)."""
