// Activities land here.
export {};
