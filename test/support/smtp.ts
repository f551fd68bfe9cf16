import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** A real SMTP server on loopback keeping each mail's raw text (headers and body), for tests of mail sent. */
export async function startSmtp(): Promise<{ url: string; mails: string[]; close(): Promise<void> }> {
  const mails: string[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, done) {
      let text = '';
      stream.on('data', (c) => (text += c.toString()));
      stream.on('end', () => (mails.push(text), done()));
    },
  });
  await new Promise<void>((res) => smtp.listen(0, '127.0.0.1', res));
  return {
    url: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
    mails,
    close: () => new Promise<void>((res) => smtp.close(() => res())),
  };
}
