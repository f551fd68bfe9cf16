// Video workflows land here (deterministic code only).
export {};
