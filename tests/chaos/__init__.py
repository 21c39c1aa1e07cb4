"""Fault injection against real Redis and real Toxiproxy: every fault, nothing silent."""
