// Each protocol module registers its routes with registerMount when imported.
import './openai';
export {};
