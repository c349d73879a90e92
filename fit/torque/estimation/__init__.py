"""The torque route's solve and error bars: base parameters, the bounded solve, the noise and systematic parts."""
