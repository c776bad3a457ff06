"""Widgets of the dashboard: the check list, the findings list, the info bar, the live panel."""
