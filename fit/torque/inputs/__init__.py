"""The recorded signals the torque route reads: which torque, its meaning, filtering and derivatives."""
