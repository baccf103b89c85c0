"""The Textual front end: a view of the session core (app/services/driver.py) that holds no logic of its own."""
