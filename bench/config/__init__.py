"""The fleet file, the kind registry and OS image specs, validated into typed objects."""
