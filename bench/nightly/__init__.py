"""The nightly HIL run: check, flash, replay every session, update over the air, run the fault suite,
store everything, render the reports and give a verdict."""
