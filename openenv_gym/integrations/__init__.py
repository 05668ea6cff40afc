"""Trainer integrations, over the client and the gym face: `integrations.trl` for TRL's GRPOTrainer."""
