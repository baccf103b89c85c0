"""The Textual front end: a view of the session core (app/driver.py) that holds no logic of its own."""
