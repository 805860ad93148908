"""Power meters on a device's supply: one protocol (`protocol.Meter`: start, stop, samples on the bench clock),
one module per meter (PPK2, Joulescope, tegrastats, the Pi 5's PMIC, hwmon files). `meters.meter_for(device)`
gives a device's meter from its fleet `energy` table (`spec.py`); `bench.measure.energy` turns the samples and
the frames' inference windows into energy per decision."""
