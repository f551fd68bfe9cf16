// Each protocol module registers its routes with registerMount when imported.
import './openai';
import './anthropic';
import './responses';
import './veo';
import './seedance';
export {};
