"""How well a torque fit explains its data: residuals, adequacy lines, held-out replays, likely causes."""
