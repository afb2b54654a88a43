"""Loading plugins, checking what they register, and resolving a config into a `SpecPlan`."""
