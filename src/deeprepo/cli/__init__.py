"""The command line: parses, calls the library, renders. No logic lives here."""
