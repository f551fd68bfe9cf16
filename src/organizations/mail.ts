import nodemailer from 'nodemailer';

/**
 * Invitation mail through nodemailer (a maintained mail library) when SMTP_URL is set (smtp://user:pass@host:port,
 * smtps:// for TLS); without it the invitation's link is shown to the inviter instead (the answer and the console).
 */
export interface Mailer {
  send(to: string, subject: string, text: string): Promise<void>;
}

export function smtpMailer(smtpUrl: string, from: string): Mailer {
  const transport = nodemailer.createTransport(smtpUrl);
  return {
    async send(to, subject, text) {
      await transport.sendMail({ from, to, subject, text });
    },
  };
}
