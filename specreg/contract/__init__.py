"""What plugins and serving loops agree on: specs, configs, resolutions, phases, protocols, memory, sampling parameters and rules. Torch-free."""
