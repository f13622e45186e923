"""Fails on the first row it cannot parse."""

raise ValueError("could not convert string to float: 'n/a'")
