import { compileForm, compileJson, type Validator } from './compile';

/** POST /v1/audio/speech and POST /v1/audio/transcriptions. */

export const SPEECH_VOICES = ['alloy', 'echo', 'fable', 'onyx', 'nova', 'shimmer'] as const;
export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
export type SpeechFormat = (typeof SPEECH_FORMATS)[number];

export interface SpeechBody {
  model: string;
  input: string;
  voice: (typeof SPEECH_VOICES)[number];
  response_format?: SpeechFormat;
  speed?: number;
  instructions?: string;
}

export const validateSpeech: Validator<SpeechBody> = compileJson<SpeechBody>({
  type: 'object',
  required: ['model', 'input', 'voice'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input: { type: 'string', minLength: 1, maxLength: 4096 },
    voice: { enum: SPEECH_VOICES },
    response_format: { enum: SPEECH_FORMATS },
    speed: { type: 'number', minimum: 0.25, maximum: 4 },
    instructions: { type: 'string', maxLength: 4096 },
  },
});

export const TRANSCRIPTION_FORMATS = ['json', 'text', 'srt', 'vtt', 'verbose_json'] as const;
export type TranscriptionFormat = (typeof TRANSCRIPTION_FORMATS)[number];

export interface TranscriptionFields {
  model: string;
  language?: string;
  prompt?: string;
  response_format?: TranscriptionFormat;
  temperature?: number;
  stream?: boolean;
}

export const validateTranscriptionFields: Validator<TranscriptionFields> = compileForm<TranscriptionFields>({
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string', minLength: 1 },
    language: { type: 'string', pattern: '^[a-z]{2}$' },
    prompt: { type: 'string', maxLength: 4096 },
    response_format: { enum: TRANSCRIPTION_FORMATS },
    temperature: { type: 'number', minimum: 0, maximum: 1 },
    stream: { type: 'boolean', const: false },
  },
});
