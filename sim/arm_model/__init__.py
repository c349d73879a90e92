"""The arm model: the parameter registry and vector, the MJCF, the loads and links, the plant's friction laws, the control laws as numpy definitions."""
