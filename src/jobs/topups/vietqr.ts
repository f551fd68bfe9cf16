import QRCode from 'qrcode';

/**
 * The NAPAS VietQR payload (EMVCo merchant-presented QR, tag-length-value) for a transfer to a bank account
 * (service QRIBFTTA), and its image. Every Vietnamese banking app scans it and fills in the account, the amount and
 * the memo the transfer must carry. Fields, in order: 00 payload format "01"; 01 initiation "12" (dynamic: it
 * carries an amount); 38 the beneficiary (00 the NAPAS GUID A000000727, 01 {00 BIN, 01 account}, 02 QRIBFTTA);
 * 53 currency 704 (VND); 54 amount; 58 country VN; 62 additional data with 08 the purpose (our memo); 63 the
 * CRC-16/CCITT-FALSE of everything before it, "6304" included, as 4 uppercase hex digits.
 */

function tlv(id: string, value: string): string {
  if (value.length > 99) throw new Error(`VietQR field ${id} is longer than 99 characters`);
  return `${id}${String(value.length).padStart(2, '0')}${value}`;
}

/** CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final xor) over the UTF-8 bytes. */
export function crc16(s: string): string {
  let crc = 0xffff;
  for (const byte of Buffer.from(s, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc.toString(16).toUpperCase().padStart(4, '0');
}

export interface VietQrInput {
  bin: string;
  account: string;
  /** Whole VND. */
  amount: number;
  /** The transfer's content (ASCII; banks drop diacritics and most punctuation). */
  memo: string;
}

export function vietQrPayload(q: VietQrInput): string {
  const beneficiary = tlv('00', q.bin) + tlv('01', q.account);
  const body =
    tlv('00', '01') +
    tlv('01', '12') +
    tlv('38', tlv('00', 'A000000727') + tlv('01', beneficiary) + tlv('02', 'QRIBFTTA')) +
    tlv('53', '704') +
    tlv('54', String(q.amount)) +
    tlv('58', 'VN') +
    tlv('62', tlv('08', q.memo)) +
    '6304';
  return body + crc16(body);
}

/** The payload as a QR image: an SVG document and a PNG data URL (for an <img>). */
export async function vietQrImages(payload: string): Promise<{ svg: string; png: string }> {
  const opts = { errorCorrectionLevel: 'M' as const, margin: 2 };
  const [svg, png] = await Promise.all([
    QRCode.toString(payload, { ...opts, type: 'svg' }),
    QRCode.toDataURL(payload, { ...opts, width: 320 }),
  ]);
  return { svg, png };
}
