"""The console's screens: one module per screen, plus the modal dialogs."""
