"""Screens: the dashboard, a finding's detail, the fix modals, help and export."""
